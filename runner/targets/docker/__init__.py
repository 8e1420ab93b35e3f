"""The docker target: training images built by content, one container per task."""
