import torch
from pcdet.ops.pointnet2.pointnet2_stack import pointnet2_utils
torch.manual_seed(0)

N = 0
M = 200
xyz = torch.rand(100 * N, 3).cuda()
xyz_batch_cnt = torch.zeros(N).int().cuda()
xyz_batch_cnt[:N] = 100

new_xyz = torch.rand(10 * M, 3).cuda()
new_xyz_batch_cnt = torch.zeros(N).int().cuda()
new_xyz_batch_cnt[:M] = 10

idx, empty_ball_mask = pointnet2_utils.ball_query(0.8, 16,
                                                  xyz, xyz_batch_cnt,
                                                  new_xyz, new_xyz_batch_cnt)
