"""services/sandbox-manager"""
