"""Bulk evaluation: questions -> answers per method (Ray, resumable) -> pairwise judging -> report."""
