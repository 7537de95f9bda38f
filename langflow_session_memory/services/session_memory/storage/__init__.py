"""The state table and Langflow's message table: the model, the state store, the message queries, what a
turn reads, and the cleanup listeners."""
