"""comfy_env.environment: setup_env and copy_files live in its setup and cache modules."""
