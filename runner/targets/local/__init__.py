"""The local target: processes on this machine, contained in a cgroup, in a virtualenv from runner.environments."""
