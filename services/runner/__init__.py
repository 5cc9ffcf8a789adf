"""services/runner"""
