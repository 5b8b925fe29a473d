"""Putting the champion to work, plain Python, no Dagster: ``bashgym serve`` (an OpenAI-compatible chat API over
the champion adapter merged into its base, continuous batching, streaming, cancellation of clients that go away)
and teacher/student routing (``router``), whose decisions go to the lake's ``routing_decisions``.

``engine`` generates (through the evaluator's continuous decoder, with token log-probabilities; prompts read
message content as text), ``batching`` is the scheduler that admits requests into the running batch and streams
their tokens, ``schemas`` is the OpenAI wire format (strict types, unsupported fields refused), ``app`` the FastAPI
app and a loopback uvicorn runner, ``router`` the strategies, the decision log and the ``routed:<strategy>``
operator, ``cli`` the command.
"""
