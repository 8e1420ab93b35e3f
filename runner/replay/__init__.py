"""Replay: real requests sent to a candidate model and to the release it would replace, their answers compared."""
