"""DQA-trained attention against exact training, and how close the bridge's covariance surrogate is to the DQA circuit's true gradient (results/dqa_vs_exact/)."""
