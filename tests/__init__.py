"""The test suite (`make test`): real files, a fake OpenAI server, a real Docker daemon."""
