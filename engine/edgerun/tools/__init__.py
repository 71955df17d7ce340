"""Developer tools: conformance runner, model inspection."""
