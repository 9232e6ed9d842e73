"""The simulated OpenAI-compatible server ``shp-serve`` and the in-process scripted provider:
test doubles of the protocol, no model at all.

The real client (``shp_ray.providers.client``) and the registry import nothing from here; the
registry names the scripted double's factory as a string, loaded only when that kind is asked
for. ``options`` loads no aiohttp, so the config can import it; ``server`` runs the app.
"""
