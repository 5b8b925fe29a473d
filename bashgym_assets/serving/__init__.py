"""Putting the champion to work, plain Python, no Dagster: ``bashgym serve`` (an OpenAI-compatible chat API over
the champion adapter merged into its base, requests batched) and teacher/student routing (``router``), whose
decisions go to the lake's ``routing_decisions``.

``engine`` generates (batched, with token log-probabilities), ``batching`` collects concurrent requests into one
generate call, ``schemas`` is the OpenAI wire format, ``app`` the FastAPI app and a loopback uvicorn runner,
``router`` the strategies, the decision log and the ``routed:<strategy>`` operator, ``cli`` the command.
"""
