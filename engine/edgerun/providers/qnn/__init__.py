"""QNN (Qualcomm AI Engine Direct) adapter."""
