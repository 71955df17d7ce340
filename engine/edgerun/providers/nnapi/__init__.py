"""NNAPI (Android Neural Networks API) adapter."""
