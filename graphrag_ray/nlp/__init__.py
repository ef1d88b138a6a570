"""Offline NLP (no downloads): sentence splitting and entity spotting for Chinese and English.

Used by the no-LLM "fast" index method and by the simulator to answer extraction prompts with
entities that really occur in the text.
"""
