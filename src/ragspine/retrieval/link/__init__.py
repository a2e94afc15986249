"""The link between retrieval and the agent; RESTRICTED exit #2 lives here."""
