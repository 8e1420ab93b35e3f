"""What a run leaves: run directories, the history index, the model registry, archives and checksums."""
