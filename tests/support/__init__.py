"""Every helper the tests share, one module per concern, imported one way: ``from support.<module> import ...``
(tests/conftest.py holds fixtures only). The process starter (``server``), the recording target
(``target_server``), API calls and assertions (``api_calls``, ``api_client``, ``classic_api``, ``raw_http``), the
stores (``databases``, ``scratch_store``, ``store_rows``, ``server_store``, ``private_postgres``), times, waits,
names, certificates, and the outside components (``azurite``, ``amqp_peer``, ``sdk_envs``, ``azure_cli``, ``sdk``,
``browser``)."""
