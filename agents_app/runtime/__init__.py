"""Django-free agent runtime: toolset assembly, the OpenAI-compatible model client and the agent loop."""
