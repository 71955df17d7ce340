"""The packed app's Python side: `entry.run_packed_model()` is what the native app calls."""
