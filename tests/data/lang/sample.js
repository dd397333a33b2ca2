import orders from './orders';
import * as payments from "./payments";
import { save, load as fetchOrder } from '../store';
import './polyfill';
const express = require('express');
const { Router, json: parseJson } = require("express");

const app = express();

/** Handles checkout. */
async function checkout(req, res) {
  const order = await fetchOrder(req.params.id);
  orders.items.filter((item) => item.ok).map(save);
  res.json(order);
}

class CartController extends BaseController {
  constructor(store) {
    super(store);
    this.store = store;
  }

  add(item) {
    this.store.items.push(item);
  }
}

const handler = (event) => {
  return process(event);
};

app.get('/checkout', checkout);
