model = TabPFNRegressor(categorical_features_indices=[0],fit_mode = "fit_preprocessors",memory_saving_mode=4,n_jobs=-1,ignore_pretraining_limits=True)
