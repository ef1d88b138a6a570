from graphrag_ray.config.load import load_settings
from graphrag_ray.config.settings import ModelConfig, Settings

__all__ = ["load_settings", "ModelConfig", "Settings"]
