"""services/aggregator"""
