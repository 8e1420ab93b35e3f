"""What to launch: the plan's types (model), the launchers that build it from a manifest, the script's argv."""
