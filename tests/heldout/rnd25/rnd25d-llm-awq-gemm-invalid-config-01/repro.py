x = torch.Tensor(2048 * 16, 14336).cuda().half()
