"""Session memory for the Langflow Agent."""
