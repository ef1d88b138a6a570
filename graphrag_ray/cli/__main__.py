"""`python -m graphrag_ray.cli`."""

from graphrag_ray.cli import command

command()
