"""Subject-level DP across federation members (Marathe & Kanani, §2-3): where a subject's data
items live (`holdings`), the local guarantee and horizontal composition (`horizontal`), and the
assumptions of those figures (`assumptions`).
"""
