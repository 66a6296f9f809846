"""Objects as the API and its webhooks show them, without a web framework: public ids, API versions, the
resource schemas, their JSON text and the stored shipment renderings. The API (api/) and the delivery
script (delivery/) both render through this package; it imports neither of them."""
