"""The action's GitHub side: the API client and PR comment, releases (publish), runner routing, S3 for large models."""
