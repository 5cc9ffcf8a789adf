"""The sandbox-manager: creates sandboxes, serves their exec RPC, seals what runs leave behind."""
