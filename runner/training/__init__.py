"""One run, phase by phase: prepare (snapshot, inputs, resume point, environment, plan), then execute and record
(pipeline); the phases hand each other one typed context (context)."""
