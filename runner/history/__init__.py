"""What a run leaves: run directories, the history index, the model registry, archives and checksums. Reading and
writing only: marking lost runs is an explicit step (Store.mark_lost), never part of opening."""
