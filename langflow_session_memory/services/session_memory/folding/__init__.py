"""Folding what a plan says: the runner (claim, fold, compare-and-swap) and the folds that run after an answer."""
