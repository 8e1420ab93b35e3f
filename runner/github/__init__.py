"""The action's GitHub side: the API client and PR comment, releases (publish; large models through runner.storage), runner routing."""
