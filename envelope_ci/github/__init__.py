"""The GitHub edge: the REST client, the sticky comment's text, workflow and file commands, Markdown trimming."""
