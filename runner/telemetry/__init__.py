"""What a run says: the console logger and masking, rank logs (log pump), metrics (parsers, recorder, summary,
TensorBoard), the report."""
