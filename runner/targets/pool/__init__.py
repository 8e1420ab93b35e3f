"""The pool target: your own hosts over ssh, leased per run."""
