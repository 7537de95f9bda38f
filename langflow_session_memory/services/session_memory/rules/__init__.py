"""The turn rules, pure: the Turn, the fold plan, what a turn sends, sizes against the window, the fitting of a call."""
