"""Object storage tftrain reads and writes on its own account: S3 (or an S3-compatible store) for
models too large for a GitHub release, checkpoint buckets and s3:// inputs. It knows nothing of
GitHub or of runs; publishing, checkpoints and downloads call it."""
