"""The Langflow adapter: the Agent's hooks, the guard and what one run carries, the search tool, the
Playground step, the prompt-cache breakpoints and the middleware that fits each call to the window."""
