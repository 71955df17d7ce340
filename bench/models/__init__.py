"""Models the benchmark makes itself (exports), cached under ~/.cache/edgerun/models/."""
