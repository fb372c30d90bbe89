device = 'cuda:0'
sam_kwargs = {
    "points_per_side": 32,
    "points_per_batch": 32,
    }
