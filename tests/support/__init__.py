"""Every helper the tests share, one module per concern, imported one way: ``from support.<module> import ...``
(tests/conftest.py holds fixtures only, and nothing imports it). Built on the package's own kit
(``scheduler_emulator.testing``) where it has the piece: ``target_server`` wraps its ``HttpTarget``.
The process starter (``server``), API calls and assertions (``api_calls``, ``api_client``, ``classic_api``,
``raw_http``, ``hostile_cases``, ``sdk_openapi``, ``conformance_replay``), stores (``databases``,
``scratch_store``, ``store_rows``, ``server_store``, ``private_postgres``), ``clocks``, ``times``, ``waiting``,
``names``, ``certificates``, and the outside components (``azurite``, ``amqp_peer``, ``sdk_envs``,
``azure_cli``, ``sdk``, ``browser``, ``keep_alive_load``); ``environment`` says whether this is CI."""
