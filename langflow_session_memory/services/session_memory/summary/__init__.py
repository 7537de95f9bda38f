"""The summary a fold writes: its prompt, its validation and the model call."""
