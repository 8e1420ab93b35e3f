"""The docker target: one container per task from the training image (runner.environments builds it)."""
