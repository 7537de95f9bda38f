"""The Langflow adapter: the Agent's hooks, an attempt's run and its phases, the guard, the component's inputs as
memory reads them, the search tool, the Playground step, the prompt-cache breakpoints and the middleware that fits
each call to the window."""
