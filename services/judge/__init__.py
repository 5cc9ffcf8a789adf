"""services/judge"""
