"""The action's GitHub side: the API client and PR comment, releases (publish; a large model goes
through runner.storage), runner routing."""
